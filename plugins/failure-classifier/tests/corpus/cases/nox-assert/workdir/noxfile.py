import nox

@nox.session(python=False)
def tests(session):
    session.run('{VENV}/bin/python', '-m', 'pytest', '-q', '-p', 'no:cacheprovider')
