def timeout():
    return 10
