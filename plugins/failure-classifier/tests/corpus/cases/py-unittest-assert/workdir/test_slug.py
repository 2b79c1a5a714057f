import unittest
from slug import slug


class SlugTest(unittest.TestCase):
    def test_spaces(self):
        self.assertEqual(slug("A B"), "a-b")

    def test_lower(self):
        self.assertEqual(slug("AB"), "ab")
