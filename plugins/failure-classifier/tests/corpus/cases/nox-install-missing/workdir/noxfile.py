import nox

@nox.session(venv_backend='venv')
def tests(session):
    session.install('loopctl-corpus-missing-xyz')
    session.run('pytest')
