__version__ = "0.2.0"

#: The distribution that installs loopctl (``pip install loopctl-core``): the name ``loopctl``
#: on the package index belongs to an unrelated project. The command and the import package
#: are both ``loopctl``.
DISTRIBUTION = "loopctl-core"
