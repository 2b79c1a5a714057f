import unittest
import xmltodict


class T(unittest.TestCase):
    def test_load(self):
        self.assertEqual(xmltodict.parse("<a>1</a>"), {"a": "1"})
