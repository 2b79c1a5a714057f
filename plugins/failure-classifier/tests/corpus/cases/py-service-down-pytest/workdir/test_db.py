import subprocess


def test_total():
    out = subprocess.run(['psql', '-h', '{TMP}/pg', '-U', 'postgres', '-d', 'calc', '-tAc', 'select 2 + 3'],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '5'
