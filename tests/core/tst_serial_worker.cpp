// SerialWorker (core/base/serial_worker.h): tasks run in the order posted on the worker's own
// thread, no more than `depth` wait, the first failure drops the tasks after it and comes back from
// every later post() and drain(), and destroying a busy worker drops what waits and joins.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/serial_worker.h"

using namespace seedvae;
using namespace std::chrono_literals;

class TstSerialWorker : public QObject {
  Q_OBJECT

 private slots:
  void runsInOrderOnItsOwnThread() {
    SerialWorker w("test-worker", 2);
    std::vector<int> seen;
    std::vector<std::thread::id> threads;
    for (int i = 0; i < 50; ++i) {
      QVERIFY(w.post([&, i] {
                 if (i % 7 == 0) std::this_thread::sleep_for(1ms);
                 seen.push_back(i);
                 threads.push_back(std::this_thread::get_id());
                 return Status::ok();
               }).is_ok());
    }
    QVERIFY(w.drain().is_ok());  // drain() also orders the tasks' writes before these reads
    QCOMPARE(static_cast<int>(seen.size()), 50);
    for (int i = 0; i < 50; ++i) QCOMPARE(seen[static_cast<size_t>(i)], i);
    for (const auto& id : threads) {
      QVERIFY(id != std::this_thread::get_id());
      QVERIFY(id == threads.front());
    }
    QVERIFY(w.drain().is_ok());  // nothing left: at once
  }

  void postWaitsWhileDepthTasksWait() {
    SerialWorker w("test-worker", 1);
    std::atomic<bool> release{false};
    std::atomic<int> started{0};
    auto blocker = [&] {
      ++started;
      while (!release) std::this_thread::sleep_for(1ms);
      return Status::ok();
    };
    QVERIFY(w.post(blocker).is_ok());  // runs
    while (started == 0) std::this_thread::sleep_for(1ms);
    QVERIFY(w.post(blocker).is_ok());  // waits: the queue is full now
    std::atomic<bool> third_posted{false};
    std::thread poster([&] {
      QVERIFY(w.post([] { return Status::ok(); }).is_ok());
      third_posted = true;
    });
    std::this_thread::sleep_for(50ms);
    QVERIFY(!third_posted);  // blocked behind the waiting task
    release = true;
    poster.join();
    QVERIFY(third_posted);
    QVERIFY(w.drain().is_ok());
    QCOMPARE(started.load(), 2);
    // the third post() waited at least while this thread slept
    QVERIFY2(w.wait_seconds() >= 0.01, qPrintable(QString::number(w.wait_seconds())));
  }

  void firstFailureStopsTheRest() {
    SerialWorker w("test-worker", 4);
    std::atomic<bool> release{false};
    std::atomic<int> ran{0};
    QVERIFY(w.post([&] {
               while (!release) std::this_thread::sleep_for(1ms);
               ++ran;
               return io_error("disk full");
             }).is_ok());
    QVERIFY(w.post([&] {
               ++ran;
               return Status::ok();
             }).is_ok());  // queued behind the failing one: dropped
    release = true;
    const Status st = w.drain();
    QCOMPARE(st.code(), StatusCode::kIoError);
    QVERIFY(st.message().find("disk full") != std::string::npos);
    QCOMPARE(ran.load(), 1);
    const Status again = w.post([&] {
      ++ran;
      return Status::ok();
    });
    QCOMPARE(again.code(), StatusCode::kIoError);
    QCOMPARE(w.drain().code(), StatusCode::kIoError);
    QCOMPARE(ran.load(), 1);
  }

  void destroyingABusyWorkerDropsWhatWaits() {
    std::atomic<int> ran{0};
    std::atomic<bool> started{false}, release{false};
    std::thread releaser;
    {
      SerialWorker w("test-worker", 3);
      QVERIFY(w.post([&] {
                 started = true;
                 while (!release) std::this_thread::sleep_for(1ms);
                 ++ran;
                 return Status::ok();
               }).is_ok());
      for (int i = 0; i < 3; ++i) {
        QVERIFY(w.post([&] {
                   ++ran;
                   return Status::ok();
                 }).is_ok());
      }
      while (!started) std::this_thread::sleep_for(1ms);
      // the running task ends only after the destructor has dropped the waiting ones
      releaser = std::thread([&] {
        std::this_thread::sleep_for(300ms);
        release = true;
      });
    }  // joins after the running task
    releaser.join();
    QCOMPARE(ran.load(), 1);
  }
};

QTEST_GUILESS_MAIN(TstSerialWorker)
#include "tst_serial_worker.moc"
