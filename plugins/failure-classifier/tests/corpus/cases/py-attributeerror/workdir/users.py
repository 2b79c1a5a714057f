def find(name):
    return None


def email(name):
    return find(name).email
