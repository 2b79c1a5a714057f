def ping():
    return 'pong'
