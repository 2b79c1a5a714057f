def explain(name):
    return f"No module named '{name}'"
