import os


def read_lines(path):
    """Return the lines of a text file, without their line endings."""
    with open(path, encoding="utf-8") as f:
        return <FILL>


def fibonacci(n):
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    return <FILL>


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        <FILL>

    def pop(self):
        return self.items.pop()


def list_python_files(directory):
    return [name for name in os.listdir(directory) if <FILL>]
