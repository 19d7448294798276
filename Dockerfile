# One image for every process type of the Procfile (compose.yaml picks the command per service): the server's
# requirements only, no test or benchmark extras; run as an unprivileged user. Settings come from the environment.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UVICORN_HOST=0.0.0.0 \
    UVICORN_PORT=8000

WORKDIR /app
# The requirements first: a change of code alone reuses the installed layer.
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
# var/ holds the uploads between temp_upload and POST /resources (a volume in compose.yaml) and beat's schedule.
RUN useradd --system --create-home --uid 10001 ovsite \
    && mkdir -p var/uploads \
    && chown -R ovsite var
USER ovsite

EXPOSE 8000
CMD ["python", "-m", "uvicorn", "ovsite.asgi:application", "--no-access-log"]
