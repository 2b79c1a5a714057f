def count(xs: list[int]) -> int:
    return len(xs)


n: str = count([1])
