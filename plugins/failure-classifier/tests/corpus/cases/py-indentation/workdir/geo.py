def area(w, h):
  x = w
    return x * h
