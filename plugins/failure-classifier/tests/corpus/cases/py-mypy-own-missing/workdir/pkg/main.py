from pkg.helpers import run

run()
