// scripts/fashion_mnist_jsonl.py on IDX files the test writes (three 2x3 images): one JSON line
// per image with its caption and label, and an 8-bit grey PNG whose pixels are the image's.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/io/io_test_util.h"

namespace megacpp::io_test {
namespace {

TEST(FashionMnistScript, WritesCaptionedPngsAndJsonLines) {
  TempDir dir;
  // Train: labels 9, 0, 4; test: label 8. Pixel values 10 * image + position.
  const std::string make = kDebianPython + " -c \"import gzip,struct,sys\n"
                           "d=sys.argv[1]\n"
                           "def idx(name, magic, items, shape, body):\n"
                           "    gzip.open(d+'/'+name,'wb').write(struct.pack('>II',magic,items)+b''.join(struct.pack('>I',s) for s in shape)+body)\n"
                           "for prefix, labels in (('train',[9,0,4]),('t10k',[8])):\n"
                           "    n=len(labels)\n"
                           "    idx(prefix+'-images-idx3-ubyte.gz',0x803,n,(2,3),bytes(10*i+p for i in range(n) for p in range(6)))\n"
                           "    idx(prefix+'-labels-idx1-ubyte.gz',0x801,n,(),bytes(labels))\n\" " +
                           dir.path().string();
  ASSERT_EQ(run_command(make).status, 0);
  const auto result = run_command(kDebianPython + " " MEGACPP_SOURCE_DIR "/scripts/fashion_mnist_jsonl.py " + (dir / "out") +
                                  " --source " + dir.path().string() + " --train 2");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("2 training and 1 test images"), std::string::npos) << result.output;
  std::ifstream train(dir / "out/train.jsonl"), test(dir / "out/test.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(train, line));
  EXPECT_EQ(line, R"({"image": "images/train/00000.png", "text": "a photo of an ankle boot", "label": 9})");
  ASSERT_TRUE(std::getline(train, line));
  EXPECT_EQ(line, R"({"image": "images/train/00001.png", "text": "a photo of a t-shirt", "label": 0})");
  EXPECT_FALSE(std::getline(train, line)) << "--train 2 keeps two";
  ASSERT_TRUE(std::getline(test, line));
  EXPECT_EQ(line, R"({"image": "images/test/00000.png", "text": "a photo of a bag", "label": 8})");
  // The PNG's pixels, decoded by zlib in Python (filter 0 rows of 3 bytes).
  const auto decoded = run_command(kDebianPython + " -c \"import zlib,sys\nd=open(sys.argv[1],'rb').read()\n"
                                                   "i=d.index(b'IDAT')\nn=int.from_bytes(d[i-4:i],'big')\n"
                                                   "print(list(zlib.decompress(d[i+4:i+4+n])))\" " +
                                   (dir / "out/images/train/00001.png"));
  EXPECT_EQ(decoded.output, "[0, 10, 11, 12, 0, 13, 14, 15]\n");
}

}  // namespace
}  // namespace megacpp::io_test
