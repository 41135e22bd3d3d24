import pytest

from tests.pipeline.spark import spark_session_for_tests


@pytest.fixture(scope="session")
def spark():
    return spark_session_for_tests()
