"""The HTTP server: the completion server and its routes (server), the request shapes (api), the
scheduler that queues and cancels requests (scheduler), batched decoding (batch, batch_step), metrics,
and Ray Serve replicas (ray_serve).

May import: engine and everything below it.
"""
