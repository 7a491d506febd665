def greet(name):
    """Return the greeting for name."""
    return "TODO"
