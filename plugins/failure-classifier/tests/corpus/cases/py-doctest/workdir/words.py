def title(s):
    """
    >>> title('hello world')
    'Hello World'
    """
    return s.capitalize()
