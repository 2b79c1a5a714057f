from conan import ConanFile


class Calc(ConanFile):
    name = 'calc'
    settings = 'os'

    def configure(self):
        self.options_list.append('shared')
