// Instruction and chat data (issue #48 item 5): the chat templates render as the models'
// Hugging Face templates do (fixtures: their apply_chat_template output for the same
// conversation), the loss mask covers exactly the completion and the assistant's turns with their
// end of turn, prepare publishes the masks with the pair (and a text prepare removes older
// ones), the split falls at an example's end, the sampler turns untrained targets into -1, and
// malformed lines are errors naming the file, the line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/factory.h"
#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/instruction_data.h"
#include "data/loss_mask.h"
#include "data/prepare.h"
#include "data/sampler.h"
#include "data/token_file.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a terse assistant."}, {"user", "What is 2+2?"}, {"assistant", " 4 "}, {"user", "And 3+3?"},
    {"assistant", "6"}};

TEST(ChatTemplate, RendersAsTheModelsTemplates) {
  // meta-llama/Meta-Llama-3-8B-Instruct's template (content trimmed, no default system message).
  EXPECT_EQ(rendered_text(render_chat("llama3", kConversation)),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a terse assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n6<|eot_id|>");
  // Qwen/Qwen2-7B-Instruct's template for a conversation with a system message.
  EXPECT_EQ(rendered_text(render_chat("chatml", kConversation)),
            "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n 4 <|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n6<|im_end|>\n");
  EXPECT_EQ(rendered_text(render_chat("plain", {{"user", "Hi"}, {"assistant", "Hello"}}), "<EOT>"),
            "### user\nHi\n\n### assistant\nHello\n\n<EOT>");
  // What trains: the assistant's content and its end of turn.
  std::string trained;
  for (const ChatPiece& p : render_chat("llama3", kConversation))
    if (p.trains) trained += p.text;
  EXPECT_EQ(trained, "4<|eot_id|>6<|eot_id|>");
  trained.clear();
  for (const ChatPiece& p : render_chat("chatml", kConversation))
    if (p.trains) trained += p.text;
  EXPECT_EQ(trained, " 4 <|im_end|>6<|im_end|>");
}

TEST(ChatTemplate, IsFoundInAModelDirectory) {
  const fs::path dir = fs::temp_directory_path() / ("trident_chat_tpl_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% endfor %}"})";
  EXPECT_EQ(chat_template_of_model_dir(dir.string()).value(), std::optional<std::string>("chatml"));
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{{ '[INST] ' + m }}"})";
  EXPECT_NE(chat_template_of_model_dir(dir.string()).status().message().find("not one trident ships"), std::string::npos);
  fs::remove_all(dir);
  EXPECT_FALSE(chat_template_of_model_dir(dir.string()).value().has_value());
}

class InstructionFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident_instr_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  std::string error_for(const std::string& line) {
    auto r = tokenize_instruction_files(tok_, {write("bad.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n" + line + "\n")},
                                        "plain");
    return r.is_ok() ? "" : r.status().message();
  }
  fs::path dir_;
  ByteTokenizer tok_;
};

TEST_F(InstructionFiles, MaskCoversTheCompletionAndTheAssistantTurns) {
  const fs::path f = write("a.jsonl", "{\"prompt\": \"Q: hi\\nA:\", \"completion\": \" yo\"}\n\n"
                                      "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, "
                                      "{\"role\": \"assistant\", \"content\": \"ok\"}]}\n");
  auto r = tokenize_instruction_files(tok_, {f}, "plain");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const InstructionTokens& t = r.value();
  std::string all, trained;
  for (size_t i = 0; i < t.ids.size(); ++i) {
    all += static_cast<char>(t.ids[i]);
    if (t.mask[i]) trained += static_cast<char>(t.ids[i]);
  }
  // The byte tokenizer has no end-of-text id: nothing is added after a completion.
  EXPECT_EQ(all, "Q: hi\nA: yo### user\nu\n\n### assistant\nok\n\n");
  EXPECT_EQ(trained, " yook\n\n");
  EXPECT_EQ(t.example_ends, (std::vector<int64_t>{11, static_cast<int64_t>(t.ids.size())}));
}

TEST_F(InstructionFiles, MalformedLinesNameTheFileTheLineAndTheField) {
  struct Case {
    std::string line, says;
  };
  for (const Case& c : {Case{"{\"prompt\": \"a\"", "bad.jsonl:2: not a JSON object"},
                        Case{"[1, 2]", "bad.jsonl:2: not a JSON object"},
                        Case{"{\"prompt\": \"a\"}", "bad.jsonl:2: the example has no \"completion\""},
                        Case{"{\"prompt\": 3, \"completion\": \"b\"}", "\"prompt\" is 3, not a string"},
                        Case{"{\"prompt\": \"a\", \"completion\": \"\"}", "\"completion\" is empty"},
                        Case{"{\"messages\": []}", "\"messages\" is [], not a non-empty list"},
                        Case{"{\"messages\": [{\"role\": \"user\"}]}", "messages[0] has no \"content\""},
                        Case{"{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}",
                             "messages[0] \"role\" is \"bot\": allowed: system, user, assistant"},
                        Case{"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "has no assistant message"},
                        Case{"{\"text\": \"x\"}", "neither \"messages\" nor \"prompt\" and \"completion\""}}) {
    const std::string e = error_for(c.line);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.line << " -> " << e;
    EXPECT_NE(e.find("bad.jsonl:2"), std::string::npos) << e;
  }
}

TEST_F(InstructionFiles, PrepareWritesMasksSplitsAtAnExampleAndATextPrepareRemovesThem) {
  std::string lines;
  for (int i = 0; i < 20; ++i)
    lines += "{\"prompt\": \"Q" + std::to_string(i) + "?\", \"completion\": \" answer number " + std::to_string(i) + "\"}\n";
  PrepareOptions opt;
  opt.inputs = {write("qa.jsonl", lines)};
  opt.out_dir = dir_ / "out";
  opt.val_fraction = 0.2;
  auto r = prepare_token_files(tok_, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r.value().masks);
  EXPECT_EQ(r.value().documents, 20);
  // The split falls at the end of an example: val.bin starts with "Q".
  auto val = TokenFile::open(opt.out_dir / "val.bin");
  ASSERT_TRUE(val.is_ok());
  int64_t first = 0;
  val.value()->read(0, 1, &first);
  EXPECT_EQ(first, 'Q');
  auto mask = LossMask::open_beside(opt.out_dir / "val.bin", val.value()->size());
  ASSERT_TRUE(mask.is_ok() && mask.value()) << mask.status().message();
  EXPECT_FALSE(mask.value()->trains(0));

  // The sampler: a target the mask does not train is -1, the others the next token.
  auto train = TokenFile::open(opt.out_dir / "train.bin");
  auto train_mask = LossMask::open_beside(opt.out_dir / "train.bin", train.value()->size());
  SequentialSampler s(train.value(), 2, 16);
  s.set_loss_mask(train_mask.value());
  const Batch b = s.batch_at(0);
  const std::vector<int64_t> y = to_vector<int64_t>(b.targets);
  for (int64_t row = 0; row < 2; ++row)
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t pos = row * 16 + i + 1;  // the target's token in the file
      int64_t tok = 0;
      train.value()->read(pos, 1, &tok);
      EXPECT_EQ(y[static_cast<size_t>(row * 16 + i)], train_mask.value()->trains(pos) ? tok : -1) << pos;
    }

  // A text prepare into the same directory leaves no mask behind.
  opt.inputs = {write("text.txt", std::string(400, 'x'))};
  ASSERT_TRUE(prepare_token_files(tok_, opt).is_ok());
  EXPECT_FALSE(fs::exists(opt.out_dir / "train.mask"));
  EXPECT_FALSE(fs::exists(opt.out_dir / "val.mask"));
  // Mixed inputs are refused.
  opt.inputs = {dir_ / "qa.jsonl", dir_ / "text.txt"};
  EXPECT_NE(prepare_token_files(tok_, opt).status().message().find("prepare them into separate directories"),
            std::string::npos);
}

TEST_F(InstructionFiles, AMaskOfAnotherSizeIsRefused) {
  const fs::path tokens = dir_ / "t.bin";
  ASSERT_TRUE(write_token_file(tokens, std::vector<uint16_t>(10, 65)).is_ok());
  ASSERT_TRUE(write_loss_mask(loss_mask_path(tokens), std::vector<uint8_t>(9, 1)).is_ok());
  auto m = LossMask::open_beside(tokens, 10);
  EXPECT_NE(m.status().message().find("has 9 bytes, but its token file"), std::string::npos) << m.status().message();
  ASSERT_TRUE(write_loss_mask(loss_mask_path(tokens), std::vector<uint8_t>(10, 2)).is_ok());
  EXPECT_NE(LossMask::open_beside(tokens, 10).status().message().find("holds byte 2 at offset 0"), std::string::npos);
}

}  // namespace
}  // namespace trident::data
