import pytest

from celeris_complete.config import PROJECT_FILE, load_settings
from celeris_complete.errors import CelerisError


def settings(tmp_path, env=None, overrides=None, user=None, project=None):
    user_file = tmp_path / "user.toml"
    if user is not None:
        user_file.write_text(user)
    work = tmp_path / "proj" / "sub"
    work.mkdir(parents=True, exist_ok=True)
    if project is not None:
        (tmp_path / "proj" / PROJECT_FILE).write_text(project)
    return load_settings(overrides, cwd=work, environ=env or {}, user_file=user_file)


def test_defaults(tmp_path):
    s = settings(tmp_path)
    assert s.steps == 4 and s.mode == "auto" and s.source("steps") == "default"


def test_precedence(tmp_path):
    s = settings(tmp_path, user="steps = 5\nthreshold = 0.5\nmode = 'line'\n")
    assert (s.steps, s.threshold, s.mode) == (5, 0.5, "line")
    s = settings(tmp_path, user="steps = 5\nthreshold = 0.5\n", project="steps = 6\n")
    assert (s.steps, s.threshold) == (6, 0.5)
    assert s.source("steps").endswith(PROJECT_FILE)
    s = settings(tmp_path, user="steps = 5\n", project="steps = 6\n", env={"CELERIS_STEPS": "7"})
    assert s.steps == 7 and "CELERIS_STEPS" in s.source("steps")
    s = settings(
        tmp_path, user="steps = 5\n", project="steps = 6\n", env={"CELERIS_STEPS": "7"}, overrides={"steps": 8}
    )
    assert s.steps == 8 and s.source("steps") == "command line"


def test_unknown_key_names_key_and_file(tmp_path):
    with pytest.raises(CelerisError, match=r"proj/\.celeris-complete\.toml: unknown setting 'stepz'"):
        settings(tmp_path, project="stepz = 3\n")
    with pytest.raises(CelerisError, match="CELERIS_BOGUS"):
        settings(tmp_path / "other", env={"CELERIS_BOGUS": "1"})


@pytest.mark.parametrize(
    "text, message",
    [
        ("steps = 'many'", "'steps' must be a int"),
        ("steps = 0", "'steps' must be >= 1"),
        ("mode = 'paragraph'", "'mode' must be one of auto, line, block"),
        ("threshold = 2.0", "'threshold' must be <= 1.0"),
        ("steps = [", "not valid TOML"),
        ("[engine]\nsteps = 2", "unexpected table"),
    ],
)
def test_bad_values_name_key_and_file(tmp_path, text, message):
    with pytest.raises(CelerisError, match="user.toml") as err:
        settings(tmp_path, user=text)
    assert message in str(err.value)


def test_env_value_is_coerced_and_checked(tmp_path):
    assert settings(tmp_path, env={"CELERIS_THRESHOLD": "0.25"}).threshold == 0.25
    with pytest.raises(CelerisError, match="CELERIS_STEPS"):
        settings(tmp_path, env={"CELERIS_STEPS": "fast"})
