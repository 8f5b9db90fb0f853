// A job's progress (core/pipeline/job_progress.h), on a clock the test drives: the time left at
// the recent pace (a stall at the start leaves the estimate once it is a window old), and the
// whole job's fraction from its stage reports (a streamed round trip's alternating encode and
// decode reports, a decode job, parts run one after another).
#include <QtTest>

#include <chrono>
#include <cmath>

#include "core/pipeline/job_progress.h"

using namespace seedvae;
using Clock = std::chrono::steady_clock;

namespace {

Clock::time_point at(double s) {
  return Clock::time_point() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1000 + s));
}

bool near(double value, double expected, double relative) {
  return std::abs(value - expected) <= relative * std::abs(expected);
}

}  // namespace

class TstJobProgress : public QObject {
  Q_OBJECT

 private slots:
  void steadyPaceGivesTheExactTimeLeft() {
    EtaEstimator eta;
    QCOMPARE(eta.update(0, 100, at(0)), -1.0);  // nothing measured yet
    double left = -1;
    for (int i = 1; i <= 40; ++i) left = eta.update(i, 100, at(0.5 * i));
    QVERIFY2(near(left, 30.0, 1e-9), qPrintable(QString::number(left)));
    QCOMPARE(eta.update(100, 100, at(50)), 0.0);
  }

  // The long video's case: the first chunks wait 26 s on the source's scan, then a chunk takes
  // 0.3 s. A window (60 s) after the stall the estimate is the pace's; the average since the
  // start would still be more than 25 % high.
  void aStallAtTheStartLeavesTheEstimate() {
    EtaEstimator eta;
    const int total = 3600;
    eta.update(0, total, at(0));
    eta.update(1, total, at(0.3));
    double t = 26.3;
    int done = 2;
    const double stalled = eta.update(done, total, at(t));
    QVERIFY2(stalled > 3 * (total - done) * 0.3, qPrintable(QString::number(stalled)));
    while (t < 26.3 + 61) {
      t += 0.3;
      ++done;
      eta.update(done, total, at(t));
    }
    const double left = eta.update(++done, total, at(t += 0.3));
    const double truth = (total - done) * 0.3;
    QVERIFY2(near(left, truth, 0.01), qPrintable(QStringLiteral("%1 vs %2").arg(left).arg(truth)));
    const double average = t / done * (total - done);
    QVERIFY(average > 1.25 * truth);
  }

  // A unit of work longer than the window: the pace spans at least one report interval.
  void unitsSlowerThanTheWindowStillGiveAnEstimate() {
    EtaEstimator eta(std::chrono::seconds(60));
    eta.update(0, 10, at(0));
    QVERIFY(near(eta.update(1, 10, at(150)), 9 * 150.0, 1e-9));
    QVERIFY(near(eta.update(2, 10, at(300)), 8 * 150.0, 1e-9));
    QVERIFY(near(eta.update(3, 10, at(400)), 7 * 100.0, 1e-9));  // the last interval's pace
  }

  void noProgressOrARestartIsNotKnown() {
    EtaEstimator eta;
    eta.update(0, 10, at(0));
    QCOMPARE(eta.update(0, 10, at(30)), -1.0);  // nothing done over the window
    QVERIFY(eta.update(2, 10, at(40)) > 0);
    // done went back: a new measurement
    QCOMPARE(eta.update(1, 10, at(41)), -1.0);
    QVERIFY(near(eta.update(2, 10, at(43)), 16.0, 1e-9));
  }

  // A streamed round trip reports encode k and decode k in turn: the fraction moves with both
  // (reading counted done), never goes back, and the time left is the chunks' pace.
  void streamedRoundTripAdvancesSmoothly() {
    JobProgress p;
    const int n = 100;
    double last = 0;
    for (int k = 1; k <= n / 2; ++k) {
      p.report("encode", k, n, at(k));
      QVERIFY(p.fraction() >= last);
      last = p.fraction();
      p.report("decode", k, n, at(k + 0.5));
      QVERIFY(p.fraction() >= last);
      last = p.fraction();
    }
    QVERIFY2(near(p.fraction(), 0.05 + 0.9 * 0.5, 1e-9), qPrintable(QString::number(last)));
    // half the job left at 0.9 / n of it a second (the writing's 5 % at the same pace)
    QVERIFY2(near(p.eta_s(), 0.5 / (0.9 / n), 0.02), qPrintable(QString::number(p.eta_s())));
    p.report("write", 0, 1, at(n));
    QVERIFY(p.fraction() >= last);
    p.finish();
    QCOMPARE(p.fraction(), 1.0);
    QCOMPARE(p.eta_s(), 0.0);
  }

  // Parts one after another: an interactive round trip (its named steps report 0 of 1), and a
  // decode job, whose encoding counts as done but not as measured pace.
  void partsInTurnAndSkippedParts() {
    JobProgress run;
    run.report("prepare", 0, 1, at(0));
    run.report("load weights", 0, 1, at(1));
    QCOMPARE(run.fraction(), 0.0);
    run.report("encode", 0, 1, at(2));
    QVERIFY(near(run.fraction(), 0.05, 1e-9));
    for (int k = 1; k <= 10; ++k) run.report("encode", k, 10, at(2 + k));
    QVERIFY(near(run.fraction(), 0.35, 1e-9));
    for (int k = 1; k <= 5; ++k) run.report("decode", k, 10, at(12 + 2 * k));
    QVERIFY(near(run.fraction(), 0.65, 1e-9));
    run.report("metrics", 0, 1, at(23));
    QVERIFY(near(run.fraction(), 0.95, 1e-9));

    JobProgress decode;
    for (int k = 1; k <= 20; ++k) decode.report("decode tiles", k, 40, at(k));
    QVERIFY(near(decode.fraction(), 0.35 + 0.6 * 0.5, 1e-9));
    // 20 tiles left at one a second: the 35 % counted without work does not shorten it
    QVERIFY2(near(decode.eta_s(), 20 + 0.05 / (0.6 / 40), 0.02),
             qPrintable(QString::number(decode.eta_s())));
  }
};

QTEST_GUILESS_MAIN(TstJobProgress)
#include "tst_job_progress.moc"
