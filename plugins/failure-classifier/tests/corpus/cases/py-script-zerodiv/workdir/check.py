def mean(xs):
    return sum(xs) / len(xs)


assert mean([]) == 0
