from conan import ConanFile


class Calc(ConanFile)
    name = 'calc'
