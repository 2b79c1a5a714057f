from tablecore import render_tabel

def show():
    render_tabel()
