from view import show

def test_show():
    show()
