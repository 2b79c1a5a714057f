text = open('data.bin', encoding='utf-8').read()
print(len(text))
