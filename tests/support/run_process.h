// Runs a program of this build to its end and collects its exit code and output: the tests that
// drive the real CLI and studio as a user would.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace seedvae::test {

struct ProcessRun {
  int code = -1;  // -1: it crashed or did not finish in time (then it was killed)
  QString out, err;
};

inline ProcessRun run_process(
    const QString& program, const QStringList& args, int timeout_ms,
    const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(program, args);
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace seedvae::test
