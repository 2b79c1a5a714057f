"""The efficacy benchmark (issue 24): does loopctl finish what a bare agent loop does not, and at
what cost? Each scenario is a small real project with failing tests, a goal, a budget and a
behaviour model (a reactive scripted model server standing for a failure pattern real agents
show); each contestant (bare fresh loop, bare continued-session loop, loopctl without plugins,
loopctl with the four first-party plugins) runs it through the real Claude Code CLI.

``nox -s efficacy`` runs it; ``python benchmarks/efficacy/run.py --help`` says how to run some of
it. docs/efficacy.md describes the scenarios, the behaviour models and the figures.
"""
