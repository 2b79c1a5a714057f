def parse(text)
    return text.split(',')
