import requests

def get(u: str) -> str:
    return requests.get(u).text
