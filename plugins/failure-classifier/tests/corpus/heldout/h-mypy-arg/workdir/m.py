def greet(name: str) -> str:
    return 'hi ' + name

greet(3)
