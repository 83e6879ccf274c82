"""Process and port plumbing every lane shares.

    process.py  a step with a deadline that holds without output; process groups ended
    ports.py    a loopback port no other lane holds
"""
