x: int = 1
