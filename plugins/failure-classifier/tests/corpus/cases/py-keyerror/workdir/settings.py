DEFAULTS = {"host": "x"}


def port():
    return DEFAULTS["port"]
