from spin import spin

def test_spin():
    spin()
