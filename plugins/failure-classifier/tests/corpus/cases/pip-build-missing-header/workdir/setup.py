from setuptools import Extension, setup

setup(name='fastzip', version='0.1', ext_modules=[Extension('fastzip', ['fastzip.c'])])
