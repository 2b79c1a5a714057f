from conan import ConanFile


class Calc(ConanFile):
    name = 'calc'

    def requirements(self):
        deps = {'fmt': '10.2.1'}
        self.requires(f"zlib/{deps['zlib']}")
