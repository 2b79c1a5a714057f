import random, unittest

class S(unittest.TestCase):
    def test_sample(self):
        self.assertIn(random.choice('abc'), 'ab')
