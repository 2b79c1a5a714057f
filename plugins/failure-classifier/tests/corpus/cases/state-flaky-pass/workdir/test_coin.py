import random, unittest

class Coin(unittest.TestCase):
    def test_heads(self):
        self.assertLess(random.random(), 0.5)

    def test_sum(self):
        self.assertEqual(1 + 1, 2)
