import pandas as pd

def table(rows):
    return pd.DataFrame(rows)
