def wait(job):
    raise TimeoutError(f"job {job} did not finish in 30 s")
