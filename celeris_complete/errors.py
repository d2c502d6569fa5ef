class CelerisError(Exception):
    """An error with a message meant for the user: printed as is, never as a traceback."""
