import nox

@nox.session(python=False)
def tests(session):
    session.run('/work/wt/i14-corpus/.venv/bin/python', '-m', 'pytest', '-q', '-p', 'no:cacheprovider')
