class Box:
    def __init__(self) -> None:
        self.width = 1

def area(b: Box) -> int:
    return b.width * b.height
