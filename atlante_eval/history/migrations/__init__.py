"""Alembic migrations of the history store, applied by :func:`..database.open_database`.

``env.py`` runs them on the connection the store passes in (inside its lock);
``versions/`` holds one module per schema revision, oldest first.
"""
