// The GUI thread never blocks: the real main window runs the demo job (built-in model, sample
// clip 256x256x17, CPU backend) while a 1 ms precise timer on the GUI thread records the gaps
// between its ticks: the event-loop stalls. Meanwhile the test plays the part of a user: it
// switches views, zooms and scrubs. Asserted: in every gap, the application's own part (the gap
// less the time the thread waited for a core or had its virtual CPU stolen by the hypervisor),
// at the run's usual speed (over the slowdown a fixed gauge measured around it), is < 100 ms
// (stall_probe.h). The wall-clock gaps are printed too; a shared CI machine can pause a process
// for longer than that without the application doing anything (CI saw one gap of 186 ms, and
// four CPU hogs beside the test on two cores give 114 ms), or run its code several times slower
// for a while (CI saw 131 ms of the GUI thread's CPU in one gap; here, in noisy stretches, a
// user's step and the repaint after it took up to 120 ms, where a quiet run of the same test has
// no gap over 20 ms).
// SEEDVAE_STUDIO_TRACE is on, so a slow GUI handler or paint names itself in the log; a gap made
// of many short pieces (a handler, then a repaint of the window) is found with
// SEEDVAE_STALL_STACKS=<ms> (stall_stacks.h).
#include <QSignalSpy>
#include <QTimer>
#include <QtTest>

#include "stall_probe.h"
#include "stall_stacks.h"
#include "studio_test_util.h"
#include "ui/compare_view.h"
#include "ui/run_controller.h"
#include "ui/scrubber.h"
#include "ui/studio_app.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

class tst_StudioStall : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    qputenv("SEEDVAE_STUDIO_TRACE", "1");  // read once, at the first traced handler
    QVERIFY(dir_.isValid());
    prepare_gui_process();  // as seedvae-studio does
  }

  void guiNeverStallsDuringARun() {
    auto w = make_window(dir_);
    w->resize(1366, 768);
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w.get()));
    QSignalSpy weights(w.get(), &MainWindow::weightsLoaded);
    QVERIFY(weights.wait(30000));
    QSignalSpy finished(w.get(), &MainWindow::runFinished);
    QSignalSpy ab(w.get(), &MainWindow::abFinished);

    // The probe: the gaps between consecutive ticks of a 1 ms timer, decomposed.
    StallProbe gaps;
    StallStacks stacks;  // SEEDVAE_STALL_STACKS=<ms>: the GUI thread's stack during a long gap
    QTimer probe;
    probe.setTimerType(Qt::PreciseTimer);
    probe.setInterval(1);
    connect(&probe, &QTimer::timeout, this, [&] {
      gaps.tick();
      stacks.tick();
    });
    // A user meanwhile: view modes, zoom, scrubbing, every 150 ms.
    int step = 0;
    QTimer user;
    user.setInterval(150);
    connect(&user, &QTimer::timeout, this, [&] {
      const CompareView::Mode modes[] = {CompareView::Mode::kSplit, CompareView::Mode::kDifference,
                                         CompareView::Mode::kSideBySide, CompareView::Mode::kRight};
      w->setViewMode(modes[step % 4]);
      w->view()->zoomBy(step % 2 ? 0.8 : 1.25);
      if (w->scrubber()->available() > 1)
        w->scrubber()->setPosition(step % w->scrubber()->available());
      ++step;
    });

    probe.start();
    user.start();
    QVERIFY(w->startRun());
    QVERIFY(finished.wait(300000));
    const RunSummary s = finished.first().first().value<RunSummary>();
    QVERIFY2(s.ok, qPrintable(s.error));
    // Then an A/B comparison (two runs, then the comparison job), still measuring.
    QVERIFY(w->startAB());
    QVERIFY(ab.wait(600000));
    probe.stop();
    user.stop();
    gaps.finish();
    const std::vector<Gap> long_gaps = gaps.longGaps();
    qInfo(
        "longest GUI event-loop gap: %.1f ms over %.1f s of runs (%lld ticks, %d user steps, "
        "%lld frames dropped by the latest-frame channel); %zu gaps of 20 ms or more; the speed "
        "gauge took %.3f ms at its fastest, %.3f at the median and %.3f at the 95th percentile",
        gaps.longestWall(), gaps.seconds(), static_cast<long long>(gaps.ticks()), step,
        w->controller()->droppedFrames(), long_gaps.size(), gaps.gauge(0.0), gaps.gauge(0.5),
        gaps.gauge(0.95));
    for (size_t i = 0; i < std::min<size_t>(long_gaps.size(), 10); ++i)
      qInfo("  gap %s", qPrintable(long_gaps[i].describe()));
    if (!gaps.attributes())
      qInfo("run-queue wait and steal are not measured here: a gap counts whole");
    QVERIFY(gaps.ticks() > 100);
    const Gap worst = gaps.longestOwn();
    QVERIFY2(worst.at_usual_speed() < 100.0,
             qPrintable("the application stalled the GUI thread: " + worst.describe()));
  }

 private:
  QTemporaryDir dir_;
};

QTEST_MAIN(tst_StudioStall)
#include "tst_studio_stall.moc"
