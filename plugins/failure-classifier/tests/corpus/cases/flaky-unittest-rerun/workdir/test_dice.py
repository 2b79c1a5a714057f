import random, unittest

class Dice(unittest.TestCase):
    def test_roll(self):
        self.assertLess(random.randint(1, 6), 4)
