def roman(n):
    return 'I' * n
