# Inlet's one image: the API, the Celery worker (which runs spark-submit as each job's driver), the
# scheduler, and the Spark standalone master and worker whose executors run the job's Python code.
FROM python:3.11-slim

# Spark needs a JVM; procps gives Spark's launch scripts the `ps` they call.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

# pyspark's wheel is a whole Spark (jars, spark-class, spark-submit); SPARK_HOME names it so that no
# launch script has to guess. PYSPARK_PYTHON is the interpreter with Inlet's dependencies, the one
# docker-compose.yml names in INLET_SPARK_PYTHON.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=/usr/local/bin/python \
    SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark

WORKDIR /app
# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p api cli worker spark_jobs sandbox \
    && pip install --no-cache-dir . \
    && pip uninstall -y inlet \
    && test -x "$SPARK_HOME/bin/spark-class" && test -d "$SPARK_HOME/jars"
COPY api ./api
COPY cli ./cli
COPY worker ./worker
COPY spark_jobs ./spark_jobs
COPY sandbox ./sandbox
COPY migrations ./migrations
COPY alembic.ini ./
RUN pip install --no-cache-dir --no-deps . \
    && useradd --create-home --uid 10001 inlet \
    && mkdir -p /data && chown inlet /data
USER inlet

EXPOSE 8000
CMD ["inlet", "api", "--host", "0.0.0.0"]
