from lxml import etree
print(etree.fromstring('<a/>').tag)
